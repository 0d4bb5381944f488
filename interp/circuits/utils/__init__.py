"""circuit-tracer's ``circuit_tracer.utils`` names, for scripts ported by changing the import
(``circuit_tracer`` -> ``interp.circuits``); library code imports the real modules.

Example:
    >>> from interp.circuits.utils import create_graph_files
    >>> from interp.circuits.utils.create_graph_files import create_graph_files
"""

from interp.circuits.utils.create_graph_files import create_graph_files

__all__ = ["create_graph_files"]
