// Package tlsconf is the TLS plumbing every Sluice connection shares: the
// Kitex servers and clients of the JobManager, the TaskManagers and the
// client, and the TaskManagers' data port. It loads a CA bundle and, for a
// member of the cluster, the member's own certificate and key from PEM
// files (Load), re-reads them when they change or when asked (Reload,
// Watch), and hands out *tls.Config values that always use the files read
// last: servers pick the certificate per handshake (GetConfigForClient),
// clients verify the server against the current CA and present the current
// certificate (VerifyConnection, GetClientCertificate). So a reload needs no
// restart and no new listener.
//
// A member's certificate serves both ways: as the server certificate of its
// ports and as its client certificate when it dials another member (mutual
// TLS). It depends on the standard library only and must not import Kitex.
package tlsconf
