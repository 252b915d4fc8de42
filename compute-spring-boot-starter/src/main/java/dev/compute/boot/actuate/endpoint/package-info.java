/** The Actuator endpoint {@code computememory}: the pool's summary, segments, blocks and timeline, and a trim. */
@NullMarked
package dev.compute.boot.actuate.endpoint;

import org.jspecify.annotations.NullMarked;
