/**
 * The memory map page: static HTML, CSS and JavaScript, served in the management context beside the Actuator
 * endpoints and fed by the {@code computememory} endpoint.
 */
@NullMarked
package dev.compute.boot.actuate.memorymap;

import org.jspecify.annotations.NullMarked;
