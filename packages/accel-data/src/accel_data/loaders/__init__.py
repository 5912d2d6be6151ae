"""The prepared loader classes and what they share: ``DataLoaderShard`` (each process reads its
own batches), ``DataLoaderDispatcher`` (the main process reads and sends slices), the XLA and
torchdata ``StatefulDataLoader`` variants, the adapter that passes for the wrapped loader, the
end-of-data flags, and the check of a saved loader position."""
