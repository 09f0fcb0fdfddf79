"""The review service behind the studio: queue, cards, display images and the decisions annotators make."""
