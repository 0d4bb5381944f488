"""Graph JSONs for the viewer's long-prompt tests, written by hand in create_graph_files's
format: a long prompt whose features sit at a few positions (most positions hold only their
token), and the optional ``attention`` field of issue 34 (head loadings and QK pairs, as
``interp.circuits`` saves them) on a small graph."""

from __future__ import annotations

import random

from tests.viz.test_graph_view import hand_graph, node

TEXT = "First Citizen: Before we proceed any further, hear me speak. All: Speak, speak. "


def long_graph(n_pos: int = 300, busy: tuple[int, ...] = (20, 21, 60, 150, 151, 152)) -> dict:
    """``n_pos`` character tokens; 2 layers of features at the ``busy`` positions and the
    last (many there), each fed by its own token and by one earlier token (as through
    attention), 3 logits at the last position. Deterministic."""
    rng = random.Random(0)
    tokens = [TEXT[p % len(TEXT)] for p in range(n_pos)]
    last = n_pos - 1
    nodes = [
        node(f"E_{ord(t)}_{p}", "embedding", "E", p, feature=ord(t)) for p, t in enumerate(tokens)
    ]
    links, features = [], []
    for p in (*busy, last):
        for layer in (0, 1):
            for k in range(12 if p == last else 3):
                nodes.append(node(f"{layer}_{7 + k}_{p}", "cross layer transcoder", str(layer), p,
                                  activation=1.0 + k))  # fmt: skip
                features.append(nodes[-1])
    for i, feature in enumerate(features):  # cumulative influence, strongest first
        feature["influence"] = round(0.05 + 0.7 * i / len(features), 4)
    logits = [f"3_{v}_{last}" for v in (101, 102, 103)]
    for i, logit in enumerate(logits):
        nodes.append(node(logit, "logit", "3", last, feature=101 + i, token_prob=0.5 / (i + 1),
                          clerp=f'Output "{chr(97 + i)}" (p={0.5 / (i + 1):.3f})'))  # fmt: skip
    for f in features:
        layer, pos = int(f["layer"]), f["ctx_idx"]
        if layer == 0:
            earlier = rng.randrange(0, pos)
            links.append(
                {
                    "source": f"E_{ord(tokens[pos])}_{pos}",
                    "target": f["node_id"],
                    "weight": rng.uniform(0.2, 1.0),
                }
            )
            links.append(
                {
                    "source": f"E_{ord(tokens[earlier])}_{earlier}",
                    "target": f["node_id"],
                    "weight": rng.uniform(-0.5, 0.5),
                }
            )
        else:
            source = f"0_{f['node_id'].split('_')[1]}_{pos}"
            links.append(
                {"source": source, "target": f["node_id"], "weight": rng.uniform(-1.0, 1.0)}
            )
            for logit in logits:
                links.append(
                    {"source": f["node_id"], "target": logit, "weight": rng.uniform(-0.3, 0.3)}
                )
    links.sort(key=lambda link: [n["node_id"] for n in nodes].index(link["target"]))
    metadata = {"slug": "long", "scan": "tiny", "transcoder_list": [], "prompt_tokens": tokens,
                "prompt": "".join(tokens), "node_threshold": 0.8, "schema_version": 1}  # fmt: skip
    q_params = {
        "pinnedIds": [],
        "supernodes": [],
        "linkType": "both",
        "clickedId": "",
        "sg_pos": "",
    }
    return {"metadata": metadata, "qParams": q_params, "nodes": nodes, "links": links}


def drawn_positions(n_pos: int, live: set[int]) -> tuple[int, int]:
    """(positions drawn, collapsed runs): a run of 2 or more positions outside ``live``
    collapses into one gap column; a lone one is drawn."""
    drawn, gaps, p = 0, 0, 0
    while p < n_pos:
        q = p
        while p not in live and q + 1 < n_pos and q + 1 not in live:
            q += 1
        if q > p:
            gaps += 1
        else:
            drawn += 1
        p = q + 1
    return drawn, gaps


HEADS = [[1, 2, 0.06], [0, 1, 0.03]]  # the loadings of hand_graph's edge 1_4_1 -> 3_7_4 (0.1)


def attention_graph() -> dict:
    """hand_graph with issue 34's optional ``attention`` field: the head loadings of its
    edge 1_4_1 -> 3_7_4 (weight 0.1 = 0.06 + 0.03 + other 0.001 + bypass 0.009) and the QK
    pairs of head L1H2 from position 4 to 1 (score 2.0 = 1.5 + 0.3 + other 0.2)."""
    data = hand_graph()
    loading = {"source": "1_4_1", "target": "3_7_4", "weight": 0.1, "bypass": 0.009,
               "heads": HEADS, "other": 0.001}  # fmt: skip
    qk = {
        "layer": 1, "head": 2, "query_pos": 4, "key_pos": 1, "score": 2.0,
        "capped_score": None, "pattern": 0.4, "remainder": 1e-7,
        "query_rows": [{"node_id": "1_7_4", "label": "L1 F7 @4"},
                       {"node_id": None, "label": "b_Q"}],
        "key_rows": [{"node_id": "E_11_1", "label": "token @1"},
                     {"node_id": None, "label": "pos embed @1"}],
        "pairs": [[0, 0, 1.5], [1, 1, 0.3]], "other": 0.2,
    }  # fmt: skip
    data["attention"] = {"schema_version": 1, "rule": "last-head", "n_layers": 2, "n_heads": 4,
                         "head_loadings": [loading], "qk": [qk]}  # fmt: skip
    return data


def dense_graph(n: int = 75) -> dict:
    """``n`` features of layer 0 at position 1, each feeding all ``n`` of layer 1 at position
    2 (``n * n`` edges), which feed one logit; weights deterministic and distinct."""
    tokens = ["a", "b", "c"]
    nodes = [node(f"E_{97 + p}_{p}", "embedding", "E", p, feature=97 + p) for p in range(3)]
    for layer, pos in ((0, 1), (1, 2)):
        for k in range(n):
            influence = round(0.1 + 0.6 * (layer * n + k) / (2 * n), 4)
            nodes.append(node(f"{layer}_{k}_{pos}", "cross layer transcoder", str(layer), pos,
                              influence=influence, activation=1.0))  # fmt: skip
    nodes.append(node("3_99_2", "logit", "3", 2, feature=99, token_prob=0.9))
    links = [{"source": f"1_{k}_2", "target": "3_99_2", "weight": 1.0 / (k + 1)} for k in range(n)]
    for j in range(n):
        links += [{"source": f"0_{k}_1", "target": f"1_{j}_2", "weight": 1.0 / (1 + k + j * n)}
                  for k in range(n)]  # fmt: skip
    links += [{"source": "E_98_1", "target": f"0_{k}_1", "weight": 0.5} for k in range(n)]
    metadata = {"slug": "dense", "prompt_tokens": tokens, "prompt": "abc", "node_threshold": 0.8}
    return {"metadata": metadata, "qParams": {}, "nodes": nodes, "links": links}
