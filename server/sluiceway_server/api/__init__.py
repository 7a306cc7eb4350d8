"""gRPC servicers: they translate protos to herder calls and herder errors to gRPC statuses."""
