/**
 * The memory map page: static HTML, CSS and JavaScript served as the Actuator web endpoint {@code computememorymap},
 * fed by the {@code computememory} endpoint.
 */
@NullMarked
package dev.compute.boot.actuate.memorymap;

import org.jspecify.annotations.NullMarked;
