"""Container affinity and anti-affinity: the annotation language and its evaluation."""
