"""The local Hub's HTTP side: requests and responses as data, the Hub's error answers, the checks every
request passes, the route table, the socket handler and the server, with the settings, context and hooks
that handlers and embedding programs share."""
