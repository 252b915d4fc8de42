/** Failure analyzers: a start-up stopped by a bad {@code compute.*} setting or an unavailable backend says why and what to change. */
@NullMarked
package dev.compute.boot.diagnostics;

import org.jspecify.annotations.NullMarked;
