// Package console tests the web console in a browser: headless Chromium (Debian's chromium),
// driven by playwright-core from npm (browser.js, installed by scripts/test with npm ci),
// against a console pointed at a three-node cluster.
package console
