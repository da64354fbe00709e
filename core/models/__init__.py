"""The classifiers: the bag of words, the fine-tuned transformer, the from-scratch tiny
transformer, the registry of saved model folders, and device and precision choice."""
