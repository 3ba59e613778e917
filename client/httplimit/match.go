package httplimit

import (
	"fmt"
	"net/http"
	"path"
	"regexp"
	"strings"
)

// Endpoint matching is ServeMux's own: every endpoint's pattern is
// registered on a private ServeMux whose handler is the endpoint itself,
// and ServeMux.Handler, which finds the handler a request would get without
// serving it, returns it. The precedence (most specific pattern wins, with
// the method and host rules), the wildcard and {$} syntax and the conflict
// checks are therefore exactly ServeMux's, in whatever Go version builds
// the program. The default endpoint is registered at "/" unless the
// configuration has its own "/".
//
// ServeMux answers a request for an unclean path ("/a/../b") or for
// "/tree" when only "/tree/" is registered with a redirect; the application
// behind the middleware may serve such a path rather than redirect, so the
// endpoint is then the one the redirect points to (the cleaned path, or the
// path with the slash), and the default only if that matches nothing.

// match returns the endpoint for r.
func (c *compiled) match(r *http.Request) *endpoint {
	if ep := c.lookup(r); ep != nil {
		return ep
	}
	p := r.URL.Path
	clean := cleanPath(p)
	if clean != p {
		if ep := c.lookupPath(r, clean); ep != nil {
			return ep
		}
	}
	if !strings.HasSuffix(clean, "/") {
		if ep := c.lookupPath(r, clean+"/"); ep != nil {
			return ep
		}
	}
	return c.def
}

func (c *compiled) lookup(r *http.Request) *endpoint {
	h, _ := c.mux.Handler(r)
	ep, _ := h.(*endpoint)
	return ep
}

// lookupPath matches a copy of r with another path.
func (c *compiled) lookupPath(r *http.Request, p string) *endpoint {
	r2 := *r
	u := *r.URL
	u.Path, u.RawPath = p, ""
	r2.URL = &u
	return c.lookup(&r2)
}

// cleanPath is ServeMux's canonical path: rooted, with . and .. elements
// and repeated slashes removed, keeping a trailing slash.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// patternSet checks patterns as ServeMux does: by registering them on one
// (ServeMux panics on an invalid or conflicting pattern).
type patternSet struct{ mux *http.ServeMux }

// registeredAt removes the source locations ServeMux adds to a conflict
// message, which would point into this package.
var registeredAt = regexp.MustCompile(` \(registered at [^)]*\)`)

func (s *patternSet) add(pattern string) error {
	if s.mux == nil {
		s.mux = http.NewServeMux()
	}
	return register(s.mux, pattern, http.NotFoundHandler())
}

// register registers h at pattern on mux, turning ServeMux's panic over an
// invalid or conflicting pattern into an error.
func register(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			msg := registeredAt.ReplaceAllString(fmt.Sprint(r), "")
			err = fmt.Errorf("%s", strings.ReplaceAll(strings.TrimPrefix(msg, "http: "), "\n", " "))
		}
	}()
	mux.Handle(pattern, h)
	return nil
}
