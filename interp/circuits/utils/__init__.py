"""circuit-tracer's ``circuit_tracer.utils`` names, for scripts ported by changing the import
(``circuit_tracer`` -> ``interp.circuits``); library code imports the real modules.

Example:
    >>> from interp.circuits.utils import create_graph_files
    >>> from interp.circuits.utils.create_graph_files import create_graph_files
    >>> from interp.circuits.utils import get_default_device
    >>> from interp.circuits.utils.hf_utils import download_hf_uris, load_transcoder_from_hub
    >>> from interp.circuits.utils.disk_offload import offload_modules
"""

from interp.circuits.utils.create_graph_files import create_graph_files
from interp.utils.devices import get_default_device

__all__ = ["create_graph_files", "get_default_device"]
