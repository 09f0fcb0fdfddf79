"""Tests of the studio: its Gradio tabs and handlers, the card API over HTTP, login and security, and the browser."""
