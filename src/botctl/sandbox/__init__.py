"""botctl sandbox: a faithful, persistent local emulator of the Chatbot Management Service API v1."""
