"""The one HTTP boundary: the client (retries, pacing, error translation), live reads,
connecting a run to the real service or to the embedded sandbox. Nothing else talks HTTP."""
