"""Answer metrics: EM, cover-EM and F1 with SQuAD-style normalisation, each paper's scoring variants picked by name,
and scoring a JSONL file of predictions."""
