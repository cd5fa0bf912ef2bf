"""The configuration: YAML documents of kind Chatbot -> Desired (see README "Configuration")."""
