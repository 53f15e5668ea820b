"""A learned ranker for the fused candidates: features (features.py), a linear pairwise model stored as JSON in
the build (model.py), training data the knowledge base yields by itself plus labelled dev pairs (pseudo.py,
train.py), and scoring at query time (infer.py)."""
