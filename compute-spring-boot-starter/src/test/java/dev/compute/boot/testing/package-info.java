/** Test helpers for the starter's tests. */
@NullMarked
package dev.compute.boot.testing;

import org.jspecify.annotations.NullMarked;
