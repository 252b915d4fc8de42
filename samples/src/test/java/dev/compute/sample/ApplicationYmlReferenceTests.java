package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.InputStream;
import java.net.URL;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.springframework.boot.env.YamlPropertySourceLoader;
import org.springframework.core.env.EnumerablePropertySource;
import org.springframework.core.env.PropertySource;
import org.springframework.core.io.ClassPathResource;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The sample's application.yml says it is the reference, every compute.* property with its default (and the README
 * sends readers to it for that): it names every property of the starter's configuration metadata, each with the
 * default the metadata gives.
 */
class ApplicationYmlReferenceTests {

    @Test
    void itNamesEveryPropertyOfTheStarterWithItsDefault() throws Exception {
        Map<String, Object> yml = new LinkedHashMap<>();
        for (PropertySource<?> source : new YamlPropertySourceLoader().load("application.yml", new ClassPathResource("application.yml"))) {
            for (String name : ((EnumerablePropertySource<?>) source).getPropertyNames()) {
                yml.put(name, source.getProperty(name));
            }
        }
        Set<String> missing = new TreeSet<>();
        Map<String, String> defaults = new LinkedHashMap<>();
        JsonMapper json = JsonMapper.builder().build();
        for (URL url : Collections.list(getClass().getClassLoader().getResources("META-INF/spring-configuration-metadata.json"))) {
            JsonNode metadata;
            try (InputStream in = url.openStream()) {
                metadata = json.readTree(in);
            }
            for (JsonNode property : metadata.path("properties")) {
                String name = property.get("name").asString();
                if (property.has("deprecation") || !(name.startsWith("compute.") || name.startsWith("management.health.compute."))) {
                    continue;
                }
                // a map or a list (budgets, managers, warmup) is there with its entries, or as {}
                if (yml.keySet().stream().noneMatch(key -> key.equals(name) || key.startsWith(name + ".") || key.startsWith(name + "["))) {
                    missing.add(name);
                } else if (property.has("defaultValue") && yml.containsKey(name)) {
                    String documented = String.valueOf(yml.get(name)).toLowerCase(Locale.ROOT);
                    if (!documented.equals(property.get("defaultValue").asString().toLowerCase(Locale.ROOT))) {
                        defaults.put(name, yml.get(name) + " in application.yml, " + property.get("defaultValue").asString() + " in the metadata");
                    }
                }
            }
        }
        assertThat(missing).as("properties the starter binds that the sample's application.yml leaves out").isEmpty();
        assertThat(defaults).as("defaults application.yml states otherwise than the metadata").isEmpty();
    }
}
