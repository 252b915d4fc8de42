/** Micrometer meters {@code compute.memory.*}, tagged backend, device and location. */
@NullMarked
package dev.compute.boot.actuate.metrics;

import org.jspecify.annotations.NullMarked;
