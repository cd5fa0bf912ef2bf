"""Resource kinds: ``kind`` (the ``ResourceKind`` interface every kind implements),
``registry`` (the kinds of a run), and one module per kind (``settings``, ``attributes``): its
model, live parsing, diff rules, requests, how a success folds into state, the baseline,
drift's values, and its rendering details, with its ``KIND`` at the end. A new kind is one
more such module and its ``register`` line in ``registry`` (ARCHITECTURE.md, "Adding a
resource kind")."""
