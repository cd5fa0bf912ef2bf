"""The configuration: YAML documents of kind Chatbot -> Desired (see README "Configuration")."""

from botctl.spec.document import json_schema
from botctl.spec.loader import load_desired

__all__ = ["json_schema", "load_desired"]
