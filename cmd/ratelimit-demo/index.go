package main

import (
	"html/template"
	"net/http"
	"net/url"
)

// shopRoute is one of the shop's routes as the inspection page's index
// shows it: the rule that limits it, the key each request is counted under
// (what its httplimit.KeyFunc builds), and keys to peek at.
type shopRoute struct {
	Pattern string
	Rule    string
	Key     template.HTML // how the key is built
	Peek    []string      // keys the tips' curl lines are counted under
}

// shopRoutes are the routes of shopWith, in its order, with the key each
// route's KeyFunc builds (TestRoutesIndex sends a request to each and finds
// it counted under the first of Peek).
var shopRoutes = []shopRoute{
	{"POST /flash-sale/orders", flashSaleRule.Name,
		"<code>global</code>: every request under one key (httplimit.Global)", []string{"global"}},
	{"POST /coupons/claim", couponRule.Name,
		"<code>user:</code> and the <code>" + userHeader + "</code> header's value (httplimit.User); no header: refused with 403, never counted", []string{"user:alice"}},
	{"GET /merchants/{id}", merchantRule.Name,
		"the client's address, bare, with no prefix: <code>127.0.0.1</code>; an IPv6 client's /64, as <code>2001:db8:1:2::/64</code> " +
			"(curl to localhost over IPv6 is <code>::/64</code>) (httplimit.IP); behind a proxy trusted with -trust, the client X-Forwarded-For names",
		[]string{"127.0.0.1", "::/64"}},
	{"POST /exports", exportRule.Name,
		"<code>user:</code> and the <code>" + userHeader + "</code> header's value, as for coupons: the leases held now", []string{"user:alice"}},
	{"POST /complete", tokensRule.Name,
		"<code>user:</code> and the <code>" + userHeader + "</code> header's value, as for coupons: the tokens of the user's completions, " +
			"each reserved as its <code>max_tokens</code> and settled at its answer's length (httplimit.Settle)", []string{"user:alice"}},
}

var indexPage = template.Must(template.New("index").Funcs(template.FuncMap{
	"peek": func(rule, key string) string {
		return "limits/?" + url.Values{"rule": {rule}, "key": {key}}.Encode()
	},
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>The shop's routes and their limits</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { border: 1px solid #ccc; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
code { background: #f6f6f6; }
</style>
</head>
<body>
<h1>The shop's routes and their limits</h1>
<p>Each route is limited by one rule of the <a href="limits/">rules in force</a>, and counts each request
under the key below: that key, typed exactly, is what the rules page's form peeks at. A key with no state
at all (mistyped, never seen, or expired) shows as such there.</p>
<table id="routes">
<tr><th>Route</th><th>Rule</th><th>Key of a request</th><th>Peek</th></tr>
{{range .}}{{$rule := .Rule}}<tr class="route">
<td><code>{{.Pattern}}</code></td>
<td><code>{{.Rule}}</code></td>
<td>{{.Key}}</td>
<td>{{range .Peek}}<div><a href="{{peek $rule .}}"><code>{{.}}</code></a></div>{{end}}</td>
</tr>
{{end}}</table>
</body>
</html>
`))

// routesIndex returns the index of the inspection page: which route uses
// which rule, and the key each request is counted under, linked to that
// key's state on the rules page (mounted at limits/ beside it).
func routesIndex() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		indexPage.Execute(w, shopRoutes)
	})
}
