"""The from-scratch tiny transformer of the textbook: word tokenizer, model with switchable
positional encoding, and a numpy reference forward pass to check it by hand."""
