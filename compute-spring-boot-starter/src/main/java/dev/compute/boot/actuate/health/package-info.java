/** The {@code compute} health contributor. */
@NullMarked
package dev.compute.boot.actuate.health;

import org.jspecify.annotations.NullMarked;
