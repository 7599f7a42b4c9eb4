"""llmbench: how fast will this LLM train or run on this hardware, and why?"""
__version__ = "0.1.0"
