"""fgclip: the shared library of the fine-grained CLIP book."""
__version__ = "0.1.0"
