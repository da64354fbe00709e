"""The BERT-style transformer classifier: configuration, pooling head, backbone loading, batched
inference, the fine-tuning loop and the recipes that train it beside the bag of words."""
