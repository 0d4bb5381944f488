"""circuit-tracer's ``circuit_tracer.utils.create_graph_files`` module, for ported scripts:
``create_graph_files`` is ``interp.circuits.graph_files``'s."""

from interp.circuits.graph_files import create_graph_files

__all__ = ["create_graph_files"]
