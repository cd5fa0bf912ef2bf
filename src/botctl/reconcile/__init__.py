"""Planning and carrying out: diff, apply, drift, safety caps, freshness of saved plans."""
