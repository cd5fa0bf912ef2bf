"""One module per resource kind (``settings``, ``attributes``): its model, live parsing, diff
rules, requests, how a success folds into state, and its rendering details. A new kind copies
the shape of these two and adds its slice to ``botctl.models``."""
