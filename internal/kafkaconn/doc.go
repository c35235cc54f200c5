// Package kafkaconn connects the Kafka connectors (jobgraph's
// kafka-source and kafka-sink) to their brokers with franz-go: the client
// options a vertex's settings give (seed brokers, SASL, TLS, isolation),
// and the submit-time check that the brokers answer and the topics exist.
// Errors never hold the SASL password.
package kafkaconn
