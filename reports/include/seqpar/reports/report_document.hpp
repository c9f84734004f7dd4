// A report as a list of sections of paragraphs, tables and images, rendered to Markdown (images
// linked as files) and to one self-contained HTML page (images embedded as base64 data URIs).
#pragma once
#include <string>
#include <vector>

namespace seqpar::reports {

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

struct Block {
  enum class Kind { paragraph, table, image, list } kind = Kind::paragraph;
  std::string text;       // paragraph text, or the image caption
  Table table;
  std::string image_file; // image: file name relative to the report directory
  std::vector<std::string> items;  // list: one line each
};

struct Section {
  std::string title;
  std::vector<Block> blocks;
  void paragraph(std::string text);
  void add_table(Table t);
  void image(std::string file, std::string caption);
  void list(std::vector<std::string> items);
};

struct Document {
  std::string title;
  std::vector<Section> sections;
};

std::string render_markdown(const Document& doc);
// `dir` is where the image files lie; a missing image becomes a note, never an external link.
std::string render_html(const Document& doc, const std::string& dir);

}  // namespace seqpar::reports
