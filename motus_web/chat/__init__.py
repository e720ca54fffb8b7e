"""The live chat over a Channels websocket: routes here, consumers beside them."""
