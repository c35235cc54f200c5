// Package tlsconftest makes certificate authorities and certificates for
// tests, at test time: no key is ever committed. Each CA is an ECDSA P-256
// key with a self-signed certificate; each certificate it issues is good
// for both server and client authentication, as a Sluice member's is.
package tlsconftest
