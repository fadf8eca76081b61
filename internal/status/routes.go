package status

import "net/http"

// addRoutes is the status listener's whole surface: the page, and / pointing at it. Only GET
// (and HEAD) is served; anything else is 405, any other path 404. Nothing here writes.
func addRoutes(mux *http.ServeMux, d Deps) {
	mux.Handle("GET "+Route, handlePage(d))
	mux.Handle("GET /{$}", http.RedirectHandler(Route, http.StatusFound))
}
