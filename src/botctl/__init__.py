"""botctl: chatbot settings and custom contact attributes as code."""

__version__ = "0.1.0"
