// Package deploy holds no code. It is the home of sweeprail's deployment files (compose,
// Kubernetes, systemd, Prometheus alert rules), and its tests check them with what this machine
// can run: promtool, docker compose config where the client has the plugin, a YAML parse of every
// file, structural checks of the bounds docs/DESIGN.md fixes, and every command line the files give
// the image or the host, run against the real binaries built from ./cmd.
package deploy
