/** The Actuator endpoint {@code computetrace}: start and stop recording allocations, download the trace. */
@NullMarked
package dev.compute.boot.actuate.trace;

import org.jspecify.annotations.NullMarked;
