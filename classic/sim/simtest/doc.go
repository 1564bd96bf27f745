// Package simtest holds the tests of package sim: the scripted
// transcripts (testdata/, read with cockroachdb/datadriven), the property
// tests and the benchmarks of every classic algorithm under the seeded
// simulator. It is a module of its own, so that the script reader stays
// out of the module graph of programs that use the library.
package simtest
