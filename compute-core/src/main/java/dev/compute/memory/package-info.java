/**
 * The manager API: {@link dev.compute.memory.UnifiedMemoryManager}, {@link dev.compute.memory.UnifiedBuffer},
 * locations, data types, statistics and exceptions. Plain Java: no Spring, no JCuda, no JOCL.
 */
@NullMarked
package dev.compute.memory;

import org.jspecify.annotations.NullMarked;
