"""Model definitions over one flat parameter buffer."""
