"""botctl sandbox: a faithful, persistent local emulator of the Chatbot Management API v1."""
