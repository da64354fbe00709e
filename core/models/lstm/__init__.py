"""A small bidirectional LSTM classifier trained from scratch on the tiny transformer's word
tokenizer: the recurrent neural model that reads word order in n sequential steps."""
