// Package prototest is the shared test support of the relay protocol's
// packages (wire, publish, ingest): test formats and identities, the golden
// frames as fuzz seeds, a model producer (a publisher's Source) and a
// recording Sink. It is test support only and imports no package of the
// protocol but relayproto itself, so every protocol package's tests can
// use it.
//
// # Files
//
//   - prototest.go: Domain, Format, Identity, AddFrameSeeds, ModelSource, Recorder, Clone.
package prototest
