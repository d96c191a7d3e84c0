"""dflashctl: deploy and diagnose DFlash speculative decoding."""

__version__ = "0.1.0"
