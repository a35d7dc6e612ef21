"""Daily summaries and the go-live verdict: builders (pure), renderers and delivery."""
