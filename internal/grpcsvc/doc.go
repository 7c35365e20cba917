// Package grpcsvc adds what every gRPC server of SIG serves besides its own
// services: the standard health service (grpc.health.v1), answering for
// every service the server serves, and server reflection, so that grpcurl,
// grpc-health-probe and load balancers work the same against sigd, readers,
// trainer controllers and parameter servers.
//
// Health entries are not listed by hand: Register reads the services from
// the server itself (grpc.Server.GetServiceInfo), so a service added to a
// process reports its health without anyone remembering to say so.
//
// Both services need no token (internal/auth's public methods). Stop is the
// graceful stop every server does: NOT_SERVING first, then drain, bounded.
//
// What it does not own: authentication (internal/auth) and the services
// themselves.
package grpcsvc
